# expect: accept
def epi(accum):
    x = accum
    x = x + 1
    x = x * x
    D = x
    return D
