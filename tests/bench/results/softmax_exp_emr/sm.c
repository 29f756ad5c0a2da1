#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include "sl_dist.h"
#include "sl_common.h"
int main(void){ size_t V=4096; float *lg=malloc(V*4); double *p=malloc(V*8); for(size_t i=0;i<V;i++) lg[i]=(float)(sin(i*0.37)*6);
 sl_dist_work *w=sl_dist_work_alloc(V); sl_sampling s={0}; s.temperature=1; s.top_p=1; 
 double best=1e9; for(int k=0;k<5;k++){ double t0=sl_now_s(); for(int r=0;r<2000;r++) sl_dist_standardise_f32(lg,V,&s,p,w); double dt=(sl_now_s()-t0)/2000; if(dt<best)best=dt;}
 double best2=1e9; double *x=malloc(V*8); for(size_t i=0;i<V;i++) x[i]=lg[i]-6.0; volatile double sink=0;
 for(int k=0;k<5;k++){ double t0=sl_now_s(); for(int r=0;r<2000;r++){ double s2=0; for(size_t i=0;i<V;i++) s2+=exp(x[i]); sink+=s2;} double dt=(sl_now_s()-t0)/2000; if(dt<best2)best2=dt;}
 printf("standardise_f32 V=4096 T=1: %.2f us; %zu libm exp alone: %.2f us\n", best*1e6, V, best2*1e6); }
