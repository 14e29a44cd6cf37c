# expect: accept
def epi(accum):
    D = accum * (2 * 3) + 1 / 4 - (2 ** 3)
    return D
