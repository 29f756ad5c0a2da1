#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include "sl_common.h"
#include "sl_model.h"
static int cmpd(const void*a,const void*b){double x=*(double*)a,y=*(double*)b;return x<y?-1:x>y;}
int main(void){
    sl_model *mt,*md; sl_model_ctx *ct,*cd;
    if(sl_model_open("models/family/target.safetensors",&mt)||sl_model_ctx_alloc(mt,256,&ct)) return 1;
    if(sl_model_open("models/family/draft-s-distilled.safetensors",&md)||sl_model_ctx_alloc(md,256,&cd)) return 1;
    size_t V=4096; float *lg=malloc(80*V*4); int32_t tok[80]; for(int i=0;i<80;i++) tok[i]=(i*7919)%(int)V;
    sl_model_forward(ct,tok,64,lg); sl_model_truncate(ct,64); sl_model_forward(cd,tok,64,lg); sl_model_truncate(cd,64);
    enum{R=200}; double d[4][R], tv[R];
    for(int r=0;r<R;r++){
        for(int i=0;i<4;i++){ double t0=sl_now_s(); sl_model_forward(cd,tok+64+i,1,lg); d[i][r]=sl_now_s()-t0; }
        sl_model_truncate(cd,64);
        double t0=sl_now_s(); sl_model_forward(ct,tok+64,5,lg); tv[r]=sl_now_s()-t0; sl_model_truncate(ct,64);
    }
    for(int i=0;i<4;i++){ qsort(d[i],R,sizeof(double),cmpd); printf("T=%d draft step %d after a target verify: median %.3f ms\n",omp_get_max_threads(),i+1,d[i][R/2]*1e3);}
    qsort(tv,R,sizeof(double),cmpd); printf("target t(5) median %.3f ms\n",tv[R/2]*1e3);
    return 0;
}
