# expect: error: (rule reduction-dtype)
# args: --dtype r=bf16
def epi(accum):
    D = accum
    r = sum(accum, dim=0)
    return D, r
