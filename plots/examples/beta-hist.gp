# speclab plot script: Distribution of β = Σ min(p, q) over logged positions
# made by: speclab plot beta-hist 'noise 1' 'noise 2' -o plots/examples/beta-hist.png
# redraw from this file's directory: gnuplot THIS.gp (reads the data file named below)
set encoding utf8
set terminal pngcairo size 495,376 font 'sans,8' linewidth 1.25 noenhanced
set output 'beta-hist.png'
set title 'Distribution of β = Σ min(p, q) over logged positions'
set xlabel 'β (acceptance probability of a draft)'
set ylabel 'fraction of positions'
set border 3 lw 0.8
set tics nomirror out scale 0.6
set grid back lc rgb '#dddddd' lw 0.5
set xrange [0:1]
set yrange [0:0.39682617187500002]
set key top right nobox samplen 2 spacing 1.1
data = 'beta-hist.dat'
plot data index 0 using 1:2:(0.050000000000000003) with boxes fs transparent solid 0.3 border lw 1 lc rgb '#0072B2' title 'noise 1, α = 0.658', \
     data index 1 using 1:2:(0.050000000000000003) with boxes fs transparent solid 0.3 border lw 1 lc rgb '#D55E00' title 'noise 2, α = 0.396'
unset output
