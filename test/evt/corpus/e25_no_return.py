# expect: error: the epilogue must end with 'return
def epi(accum):
    D = accum
