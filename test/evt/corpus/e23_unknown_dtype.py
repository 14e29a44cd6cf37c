# expect: error: unknown dtype 'f8'
def epi(accum, bias: "1,N:f8"):
    D = accum + bias
    return D
