#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <time.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+1e-9*t.tv_nsec;}
static int cmpd(const void*a,const void*b){double x=*(double*)a,y=*(double*)b;return x<y?-1:x>y;}
/* mode: 0 stream f32 adds; 1 f16 cvt+fma no pf; 2 pf T0 d; 3 pf T1 d; 4 pf T2 d; 5 pf NTA d; 6 f32 fma (1 tok) no pf */
static double pass(const unsigned char *a, size_t bytes, int mode, size_t d, double *sink){
    double t0=now(), total=0;
#pragma omp parallel reduction(+:total)
    {
        __m256 s0=_mm256_setzero_ps(), s1=s0,s2=s0,s3=s0, x=_mm256_set1_ps(0.5f);
        int nt=omp_get_num_threads(), me=omp_get_thread_num();
        size_t lines=bytes/64, l0=lines*me/nt, l1=lines*(me+1)/nt;
        if(mode==0){ for(size_t l=l0&~1;l<(l1&~1);l+=2){const float*p=(const float*)(a+l*64);
            s0=_mm256_add_ps(s0,_mm256_load_ps(p));s1=_mm256_add_ps(s1,_mm256_load_ps(p+8));s2=_mm256_add_ps(s2,_mm256_load_ps(p+16));s3=_mm256_add_ps(s3,_mm256_load_ps(p+24));}}
        else if(mode==6){ for(size_t l=l0&~1;l<(l1&~1);l+=2){const float*p=(const float*)(a+l*64);
            s0=_mm256_fmadd_ps(_mm256_load_ps(p),x,s0);s1=_mm256_fmadd_ps(_mm256_load_ps(p+8),x,s1);s2=_mm256_fmadd_ps(_mm256_load_ps(p+16),x,s2);s3=_mm256_fmadd_ps(_mm256_load_ps(p+24),x,s3);}}
        else for(size_t l=l0;l<l1;l++){const unsigned char*p=a+l*64;
            if(mode==2)_mm_prefetch((const char*)p+d,_MM_HINT_T0); else if(mode==3)_mm_prefetch((const char*)p+d,_MM_HINT_T1);
            else if(mode==4)_mm_prefetch((const char*)p+d,_MM_HINT_T2); else if(mode==5)_mm_prefetch((const char*)p+d,_MM_HINT_NTA);
            x=_mm256_broadcast_ss((const float*)(a+ (l&63)*4)); 
            s0=_mm256_fmadd_ps(_mm256_cvtph_ps(_mm_load_si128((const __m128i*)p)),x,s0);
            s1=_mm256_fmadd_ps(_mm256_cvtph_ps(_mm_load_si128((const __m128i*)(p+16))),x,s1);
            s2=_mm256_fmadd_ps(_mm256_cvtph_ps(_mm_load_si128((const __m128i*)(p+32))),x,s2);
            s3=_mm256_fmadd_ps(_mm256_cvtph_ps(_mm_load_si128((const __m128i*)(p+48))),x,s3);}
        __m256 s=_mm256_add_ps(_mm256_add_ps(s0,s1),_mm256_add_ps(s2,s3)); float f[8]; _mm256_storeu_ps(f,s); for(int k=0;k<8;k++) total+=f[k];
    }
    *sink+=total; return now()-t0;
}
int main(int argc,char**argv){
    size_t bytes=(size_t)256<<20; unsigned char*a=aligned_alloc(64,bytes+65536);
    for(size_t i=0;i<(bytes+65536)/2;i++) ((uint16_t*)a)[i]=0x3c00;
    int nv=(argc-1)/2; int mo[16]; size_t dd[16]; for(int i=0;i<nv;i++){mo[i]=atoi(argv[1+2*i]); dd[i]=atol(argv[2+2*i]);}
    int R=25; double ra[16][64], sink=0;
    for(int r=0;r<R;r++) for(int v=0;v<nv;v++){ double ts=pass(a,bytes,0,0,&sink), tk=pass(a,bytes,mo[v],dd[v],&sink); ra[v][r]=ts/tk; }
    for(int v=0;v<nv;v++){qsort(ra[v],R,sizeof(double),cmpd); printf("T=%d mode %d d=%zu: median %.1f%% [%.1f, %.1f]\n",omp_get_max_threads(),mo[v],dd[v],100*ra[v][R/2],100*ra[v][R/4],100*ra[v][3*R/4]);}
    if(sink==42)puts(""); return 0;
}
