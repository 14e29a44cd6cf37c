# expect: accept
def epi(accum, bias: "1,N"):
    D = (accum + bias) ** 2 - -accum ** 3
    return D
