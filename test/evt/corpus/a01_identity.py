# expect: accept
def epi(accum):
    D = accum
    return D
