# expect: error: dim= lists dimension 1 twice
def epi(accum):
    D = accum
    r = max(accum, dim=(1, -1))
    return D, r
