# expect: error: 'accum' is the accumulator and cannot be an output
def epi(accum):
    D = accum + 1
    return D, accum
