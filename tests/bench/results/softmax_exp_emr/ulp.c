#include <stdio.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "sl_dist.h"
static int64_t ord(double d){int64_t i; memcpy(&i,&d,8); return i;}
int main(void){ long worst=0; double wx=0; long n=0; 
 for (double x=0; x>=-745.5; x-=0.0001234567) { double a=sl_dist_exp_nonpos(x), b=exp(x); long u=labs(ord(a)-ord(b)); if(u>worst){worst=u;wx=x;} n++; }
 double sp[]={0,-0.0,-1e-300,-1e-17,-0.5*log(2),0.5*log(2)*-1.0000001,-708.39,-708.4,-709.78,-744.4,-745.13,-745.14,-745.2,-746,-INFINITY,-1e300};
 for(int i=0;i<16;i++){ double a=sl_dist_exp_nonpos(sp[i]), b=exp(sp[i]); printf("x=%g: %.17g vs libm %.17g (%ld ulp)\n", sp[i], a, b, labs(ord(a)-ord(b))); }
 printf("%ld points in [-745.5, 0]: worst %ld ulp at x=%.17g\n", n, worst, wx); }
