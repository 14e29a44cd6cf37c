# expect: error: chained comparisons are not supported
def epi(accum):
    D = 0 < accum < 1
    return D
