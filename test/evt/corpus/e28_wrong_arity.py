# expect: error: clamp() takes 3 arguments, got 2
def epi(accum):
    D = clamp(accum, 1)
    return D
