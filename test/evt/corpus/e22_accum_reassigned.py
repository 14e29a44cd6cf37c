# expect: error: 'accum' names the accumulator and cannot be reassigned
def epi(accum):
    accum = accum * 2
    D = accum
    return D
