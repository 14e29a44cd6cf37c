# expect: accept
def epi(accum, C, alpha: "scalar", beta: "scalar"):
    D = alpha * accum + beta * C
    return D
