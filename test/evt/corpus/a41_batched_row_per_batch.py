# expect: accept
# args: --shape 256,256,2
def epi(accum, bias: "1,N,L", shared: "1,N"):
    D = accum + bias * shared
    return D
