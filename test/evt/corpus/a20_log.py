# expect: accept
def epi(accum):
    D = log(abs(accum) + 1)
    return D
