# expect: error: expected an expression, got the end of the line
def epi(accum):
    D = accum +
    return D
