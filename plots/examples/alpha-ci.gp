# speclab plot script: α per log with its 95% bootstrap CI over sequences
# made by: speclab plot alpha-ci 'noise 1' 'noise 2' -o plots/examples/alpha-ci.png
# redraw from this file's directory: gnuplot THIS.gp (reads the data file named below)
set encoding utf8
set terminal pngcairo size 495,376 font 'sans,8' linewidth 1.25 noenhanced
set output 'alpha-ci.png'
set title 'α per log with its 95% bootstrap CI over sequences'
set xlabel 'log'
set ylabel 'α (expected acceptance rate)'
set border 3 lw 0.8
set tics nomirror out scale 0.6
set grid back lc rgb '#dddddd' lw 0.5
set xrange [0.5:2.5]
set yrange [0.35051026955539211:0.70143425677141091]
set xtics ('noise 1' 1, 'noise 2' 2)
unset key
data = 'alpha-ci.dat'
plot data index 0 using 1:2:3:4 with yerrorbars pt 7 ps 1.1 lw 2 lc rgb '#0072B2' notitle, \
     data index 1 using 1:2:3:4 with yerrorbars pt 7 ps 1.1 lw 2 lc rgb '#D55E00' notitle
unset output
