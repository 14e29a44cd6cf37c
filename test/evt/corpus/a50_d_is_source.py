# expect: accept
def epi(accum, C):
    D = C
    return D
