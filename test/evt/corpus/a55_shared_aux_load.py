# expect: accept
# An aux load with two users: a DAG region, not two TMA loads.
def epi(accum, X):
    D = accum * X + X
    return D
