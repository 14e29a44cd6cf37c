# expect: accept
# args: --shape 256,256,3
def epi(accum, C, X):
    D = accum + C * X
    return D
