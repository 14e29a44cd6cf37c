# expect: accept
# A region with more than four ops (tuple Arguments).
def epi(accum, C, X, bias: "1,N", s: "M,1"):
    a = accum + C
    b = a * X
    c = a - bias
    d = b * c + a * s
    D = relu(d) + a
    return D
