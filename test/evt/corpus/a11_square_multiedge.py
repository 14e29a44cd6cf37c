# expect: accept
def epi(accum, C):
    x = accum + C
    D = x * x
    return D
