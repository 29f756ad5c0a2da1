#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "sl_kern.h"
#include "stream_pass.h" /* tests/bench/: build with -Itests/bench */
int mb_rt = 0; size_t mb_dist = 16384; int mb_hint = 0; static size_t dists[8]; static int hints[8];
#define now sl_now_s
static int cmpd(const void*a,const void*b){double x=*(double*)a,y=*(double*)b;return x<y?-1:x>y;}
int main(int argc,char**argv){
    int nv = (argc-1)/3; int modes[8]; for(int i=0;i<nv;i++){ modes[i]=atoi(argv[3*i+1]); dists[i]=atol(argv[3*i+2]); hints[i]=atoi(argv[3*i+3]);}
    size_t out=3072,in=768, M=52; if(getenv("MB_OUT")) out=atoi(getenv("MB_OUT")); sl_dtype dt=SL_DT_F16;
    if(getenv("MB_IN")) in=atoi(getenv("MB_IN"));
    if(getenv("MB_M")) M=atoi(getenv("MB_M"));
    size_t pb = sl_kern_packed_bytes(dt,out,in);
    unsigned char *W = aligned_alloc(64, pb*M);
    void *src = malloc(out*in*4);
    float *x = aligned_alloc(64,in*4*16), *y=aligned_alloc(64,out*4*16), *yref=malloc(out*4);
    srand(1);
    float *tmp=malloc(out*in*4); for(size_t i=0;i<out*in;i++) tmp[i]=(rand()/(double)RAND_MAX-0.5)*0.1;
    sl_kern_from_f32(src,tmp,dt,out*in);
    for(size_t m=0;m<M;m++) sl_kern_pack(W+m*pb,src,dt,out,in);
    for(size_t i=0;i<in;i++) x[i]=(rand()/(double)RAND_MAX-0.5);
    size_t nf=(pb*M/4)&~(size_t)31; float *buf=aligned_alloc(64,nf*4);
    for(size_t i=0;i<nf;i++) buf[i]=(float)(i&7);
    int R=30; double ra[8][64],sink=0, tb[8]; for(int v=0;v<nv;v++) tb[v]=1e9;
    for(int v=0;v<nv;v++){ mb_rt=modes[v]; mb_dist=dists[v]; mb_hint=hints[v]; sl_kern_mm mm={y,W,dt,NULL,out,0,1,NULL}; sl_kern_matmul_multi(&mm,1,x,1,in);
        if(v==0) memcpy(yref,y,out*4); else if(memcmp(yref,y,out*4)) printf("mode %d: BITS DIFFER\n",modes[v]); }
    for(int r=0;r<R;r++) for(int v=0;v<nv;v++){
        mb_rt=modes[v]; mb_dist=dists[v]; mb_hint=hints[v];
        double ts=stream_pass(buf,nf,&sink);
        double t0=now();
        for(size_t m=0;m<M;m++){ sl_kern_mm mm={y,W+m*pb,dt,NULL,out,0,1,NULL}; sl_kern_matmul_multi(&mm,1,x,1,in);}
        double td=now()-t0; ra[v][r]=ts/td*(pb*M)/(nf*4.0); if(td<tb[v]) tb[v]=td;
    }
    for(int v=0;v<nv;v++){ qsort(ra[v],R,sizeof(double),cmpd);
      printf("mode %d d=%zu h=%d T=%d in=%zu: best %.2f ms, ratio to stream median %.1f%% [q1 %.1f q3 %.1f]\n",modes[v],dists[v],hints[v],omp_get_max_threads(),in,tb[v]*1e3,100*ra[v][R/2],100*ra[v][R/4],100*ra[v][3*R/4]);}
    if(sink==42)puts("");
    return 0;
}
