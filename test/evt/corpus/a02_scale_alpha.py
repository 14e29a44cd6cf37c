# expect: accept
def epi(accum, alpha: "scalar"):
    D = alpha * accum
    return D
