# expect: accept
def epi(accum):
    D = accum * 2
    s = sum(accum, dim=(0, 1))
    return D, s
