# expect: error: 'D' is returned twice
def epi(accum):
    D = accum
    return D, D
