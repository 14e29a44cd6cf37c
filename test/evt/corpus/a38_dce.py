# expect: accept
def epi(accum, C, unused: "1,N", alpha: "scalar"):
    dead = exp(C) * alpha
    dead2 = dead + 1
    D = accum * 3
    return D
