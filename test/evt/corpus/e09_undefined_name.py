# expect: error: name 'y' is not defined
def epi(accum):
    D = accum + y
    return D
