# expect: accept
def epi(accum, C):
    a = relu(accum + C)
    b = relu(C + accum)
    D = a + b
    return D
