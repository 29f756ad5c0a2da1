#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include "sl_common.h"
#include "sl_model.h"
size_t mb_par = 1u << 20;
static int cmpd(const void*a,const void*b){double x=*(double*)a,y=*(double*)b;return x<y?-1:x>y;}
int main(void){
    sl_model *mt,*md; sl_model_ctx *ct,*cd;
    if(sl_model_open("models/family/target.safetensors",&mt)||sl_model_ctx_alloc(mt,256,&ct)) return 1;
    if(sl_model_open("models/family/draft-s-distilled.safetensors",&md)||sl_model_ctx_alloc(md,256,&cd)) return 1;
    size_t V=4096; float *lg=malloc(80*V*4); int32_t tok[80]; for(int i=0;i<80;i++) tok[i]=(i*7919)%(int)V;
    sl_model_forward(ct,tok,64,lg); sl_model_truncate(ct,64); sl_model_forward(cd,tok,64,lg); sl_model_truncate(cd,64);
    enum{R=200}; double d[2][4][R], tv[R];
    for(int r=0;r<R;r++){
        int v=(r&1); mb_par = v ? (1u<<18) : (1u<<20); for(int i=0;i<4;i++){ double t0=sl_now_s(); sl_model_forward(cd,tok+64+i,1,lg); d[v][i][r/2]=sl_now_s()-t0; }
        sl_model_truncate(cd,64);
        double t0=sl_now_s(); sl_model_forward(ct,tok+64,5,lg); tv[r]=sl_now_s()-t0; sl_model_truncate(ct,64);
    }
    for(int v=0;v<2;v++) for(int i=0;i<4;i++){ qsort(d[v][i],R/2,sizeof(double),cmpd); printf("T=%d threshold %s draft step %d: median %.3f ms\n",omp_get_max_threads(),v?"2^18":"2^20",i+1,d[v][i][R/4]*1e3);}
    qsort(tv,R,sizeof(double),cmpd); printf("target t(5) median %.3f ms\n",tv[R/2]*1e3);
    return 0;
}
