# expect: accept
def epi(accum):
    D = abs(accum) ** 1.5
    return D
