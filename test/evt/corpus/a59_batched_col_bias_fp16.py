# expect: accept
# args: --shape 256,256,2 --dtype f16
def epi(accum, s: "M,1", X):
    D = (accum + s) * sigmoid(X)
    return D
