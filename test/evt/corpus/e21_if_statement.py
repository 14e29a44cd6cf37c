# expect: error: 'if' is not supported
def epi(accum):
    if accum:
        D = accum
    return D
