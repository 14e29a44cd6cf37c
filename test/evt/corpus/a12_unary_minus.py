# expect: accept
def epi(accum, C):
    D = -accum + -C * 2
    return D
