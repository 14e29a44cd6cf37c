# expect: error: use maximum(a, b)
def epi(accum, C):
    D = max(accum, C)
    return D
