# expect: error: the epilogue must return D
def epi(accum):
    E = accum + 1
    return E
