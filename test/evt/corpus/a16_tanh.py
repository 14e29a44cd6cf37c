# expect: accept
def epi(accum):
    D = tanh(accum * 0.5)
    return D
