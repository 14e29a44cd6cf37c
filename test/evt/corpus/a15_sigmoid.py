# expect: accept
def epi(accum):
    D = sigmoid(accum)
    return D
