# The C example (import_mxnet.c) on the corpus's LeNet, as MXNet 1.9.1 exported it:
#   - it gives MXNet's outputs (model_lenet-outputs.params) within 1e-5;
#   - it fails on outputs that differ from the expected ones (one value changed);
#   - it fails, with deft's message, on a truncated parameter file, on an
#     input file that lacks the model's input, and on a model file that is not there.
# Run with -DEXAMPLE=<the example> -DCORPUS=<tests/mxnet/corpus> -DWORK_DIR=<scratch folder>.
set(lenet ${CORPUS}/model_lenet)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

# run(<name> <expected exit: 0 or 1> <pattern the output must match> args...)
function(run name want_rc pattern)
    execute_process(COMMAND ${EXAMPLE} ${ARGN}
                    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
    if(NOT rc STREQUAL want_rc OR NOT "${out}${err}" MATCHES "${pattern}")
        message(FATAL_ERROR "${name}: exit status ${rc} (expected ${want_rc}), output not "
                            "matching '${pattern}':\n${out}${err}")
    endif()
    message(STATUS "${name}:\n${out}${err}")
endfunction()

run("LeNet" 0 "lenet_dense1_fwd_output matches .*model_lenet-outputs.params"
    ${lenet} ${lenet}-inputs.params ${lenet}-outputs.params)

# Element 0 of the expected outputs (a float32 at byte 64 of the file) set to 1.0.
file(COPY_FILE ${lenet}-outputs.params ${WORK_DIR}/wrong-outputs.params)
execute_process(COMMAND sh -c "printf '\\000\\000\\200\\077' | dd of=wrong-outputs.params bs=1 seek=64 conv=notrunc 2>/dev/null"
                WORKING_DIRECTORY ${WORK_DIR} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
    message(FATAL_ERROR "cannot write wrong-outputs.params")
endif()
run("LeNet against changed outputs" 1
    "error: output 'lenet_dense1_fwd_output' differs from .*wrong-outputs.params: element 0 is -0.267.*, expected 1\n"
    ${lenet} ${lenet}-inputs.params ${WORK_DIR}/wrong-outputs.params)

# The parameters cut short, next to a copy of the symbol.
file(COPY_FILE ${lenet}-symbol.json ${WORK_DIR}/truncated-symbol.json)
execute_process(COMMAND sh -c "head -c 20000 '${lenet}-0000.params' > truncated-0000.params"
                WORKING_DIRECTORY ${WORK_DIR} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
    message(FATAL_ERROR "cannot write truncated-0000.params")
endif()
run("truncated parameters" 1 "error: cannot load the parameters: .*truncated-0000.params.*: array 4: truncated"
    ${WORK_DIR}/truncated ${lenet}-inputs.params)

run("inputs without the model's input" 1
    "error: the graph's argument 'data' is in neither .*model_lenet-0000.params nor .*model_lenet-outputs.params"
    ${lenet} ${lenet}-outputs.params)

run("a model that is not there" 1 "error: cannot load the graph: .*no-such-model-symbol.json"
    ${WORK_DIR}/no-such-model ${lenet}-inputs.params)
