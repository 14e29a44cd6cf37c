# expect: error: augmented assignment
def epi(accum):
    D = accum
    D += 1
    return D
