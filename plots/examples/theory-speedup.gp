# speclab plot script: Walltime improvement (Theorem 3.8), c = 0.05
# made by: speclab plot theory-speedup --c 0.05 -o plots/examples/theory-speedup.png
# redraw from this file's directory: gnuplot THIS.gp (reads the data file named below)
set encoding utf8
set terminal pngcairo size 495,376 font 'sans,8' linewidth 1.25 noenhanced
set output 'theory-speedup.png'
set title 'Walltime improvement (Theorem 3.8), c = 0.05'
set xlabel 'α (expected acceptance rate)'
set ylabel 'speedup (× autoregressive decoding)'
set border 3 lw 0.8
set tics nomirror out scale 0.6
set grid back lc rgb '#dddddd' lw 0.5
set xrange [0:1]
set yrange [0:]
set key top left Left reverse nobox samplen 2 spacing 1.1
data = 'theory-speedup.dat'
plot data index 0 using 1:2 with lines lw 1.5 dt 1 lc rgb '#0072B2' title 'γ = 1', \
     data index 1 using 1:2 with lines lw 1.5 dt 1 lc rgb '#D55E00' title 'γ = 2', \
     data index 2 using 1:2 with lines lw 1.5 dt 1 lc rgb '#009E73' title 'γ = 3', \
     data index 3 using 1:2 with lines lw 1.5 dt 1 lc rgb '#E69F00' title 'γ = 5', \
     data index 4 using 1:2 with lines lw 1.5 dt 1 lc rgb '#CC79A7' title 'γ = 7', \
     data index 5 using 1:2 with lines lw 1.5 dt 1 lc rgb '#56B4E9' title 'γ = 10', \
     data index 6 using 1:2 with lines lw 1.5 dt 2 lc rgb '#000000' title 'no speculation'
unset output
