# expect: accept
def epi(accum, X):
    D = accum * X
    return D
