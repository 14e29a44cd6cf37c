# expect: error: return values must be variable names
def epi(accum):
    D = accum
    return D, accum + 1
