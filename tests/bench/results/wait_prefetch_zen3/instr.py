# applies a temporary barrier-wait instrumentation to sl_kern_mm.h
p='/work/main/models/sl_kern_mm.h'; s=open(p).read()
old='''            for (long u = a; u < b; u++) call_unit(mm, first, u, x, xT, n, in, DT, quad_max);                   \\
        _Pragma("omp barrier")                                                                                  \\'''
new='''            for (long u = a; u < b; u++) call_unit(mm, first, u, x, xT, n, in, DT, quad_max);                   \\
        { double w0_ = sl_now_s(); \\
        _Pragma("omp barrier")                                                                                  \\
        sl_kern_wait_s[me * 8] += sl_now_s() - w0_; }\\'''
assert old in s; s=s.replace(old,new)
s=s.replace('#include "sl_kern.h"\n','#include "sl_kern.h"\n#include "sl_common.h"\nextern double sl_kern_wait_s[512];\n',1)
open(p,'w').write(s)
p='/work/main/models/sl_kern.c'; s=open(p).read()
s=s.replace('void sl_kern_team_reset(','double sl_kern_wait_s[512];\nvoid sl_kern_team_reset(',1)
open(p,'w').write(s)
