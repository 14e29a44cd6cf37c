# expect: accept
def epi(accum, bias: "1,N"):
    k = 2.0 * 3
    D = accum + k + bias * -1e-1
    return D
