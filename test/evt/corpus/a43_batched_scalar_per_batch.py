# expect: accept
# args: --shape 256,256,2
def epi(accum, alpha: "1,1,L", scale: "M,1,L"):
    D = alpha * accum * scale
    return D
