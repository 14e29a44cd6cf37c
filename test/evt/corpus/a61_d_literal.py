# expect: accept
def epi(accum):
    D = 2.5
    return D
