module {
  graph.quantized_weight @w {group = 32} : tensor<100x64xi4>
}
